import sys

from hack.demo.main import main

sys.exit(main())
