"""``python -m service`` is the ``loadmgr`` command."""

import sys

from service.commands.cli import main

sys.exit(main())
