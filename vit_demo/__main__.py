import sys

from vit_demo.cli import main

sys.exit(main())
