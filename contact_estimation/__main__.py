"""`python -m contact_estimation` is `contact-estimation`."""
import sys

from contact_estimation.cli import main

sys.exit(main())
