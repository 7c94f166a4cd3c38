import sys

from fuzzer.commands.main import main

sys.exit(main())
