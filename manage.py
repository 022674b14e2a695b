#!/usr/bin/env python
"""Django's command-line utility; a configuration error prints one line and exits 2."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewportal.settings")
    from django.core.management import execute_from_command_line

    from reviewportal.config import ConfigurationError, exit_on_configuration_error

    try:
        execute_from_command_line(sys.argv)
    except ConfigurationError as exc:
        exit_on_configuration_error(exc)


if __name__ == "__main__":
    main()
