"""The REST API: ``create_app(service, settings)`` builds the FastAPI app every instance serves."""

from service.api.app import create_app

__all__ = ["create_app"]
