"""Stowage's own exception tree.

Third-party errors (msgpack, NVML, the Kubernetes client, OSError from host files) are
translated at the boundary into one of these, ``raise ... from e``, so callers catch
one family and every message says what was wrong::

    StowageError
    ├── SchemaError      a report or directive does not match the schema (codec)
    ├── QuantityError    a Kubernetes resource quantity string is malformed
    ├── ConfigError      a setting, flag or config file value is invalid
    └── HostPathError    a host root (--proc-root, --sys-root) is missing or unreadable
"""

from __future__ import annotations


class StowageError(Exception):
    """Base of every error Stowage raises on purpose."""


class SchemaError(StowageError, ValueError):
    """A payload does not match the report schema; the message names the field path."""


class QuantityError(StowageError, ValueError):
    """A string is not a valid Kubernetes resource quantity."""


class ConfigError(StowageError, ValueError):
    """A configuration value is invalid; the message names the key."""


class HostPathError(StowageError, OSError):
    """A host root directory is missing or unreadable; the message names the path."""
