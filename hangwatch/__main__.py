import sys

from hangwatch.cli import main

sys.exit(main())
