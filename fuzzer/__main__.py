import sys

from fuzzer.cli import main

sys.exit(main())
