import sys

from frank.console.cli import main

sys.exit(main())
