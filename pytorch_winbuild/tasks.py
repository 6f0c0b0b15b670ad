"""The Invoke tasks: each one parses its flags, calls the package, prints. Nothing else.

Defaults for every flag come from Invoke's configuration under the `winbuild` key, so they can
be set in invoke.yaml (project or user) or as INVOKE_WINBUILD_<NAME> environment variables.
"""

from __future__ import annotations

from invoke import Collection, Context, task

from .cli_errors import reports_errors

namespace = Collection()
namespace.configure({"winbuild": {}})
