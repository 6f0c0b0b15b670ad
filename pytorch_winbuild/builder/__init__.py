"""Act on a plan: get the source, enter the environment, build, explain failures, verify, report.

One job per module: `source` (checkout, clone, old-era prep), `environment` (vcvars + the plan's
changes), `build_folder` (clean, generator/toolset memory), `compiler_cache`, `process` (run a
command with its log and Ctrl-C handling), `progress` (what the console shows), `pipeline`
(the phases in order, with the report), `settings` (build_config/build_runner.toml).
"""

from pytorch_winbuild.builder.build_folder import clean_build_folder
from pytorch_winbuild.builder.pipeline import BuildRequest, ExtensionRequest, default_log_dir, run_build, run_build_ext
from pytorch_winbuild.builder.source import SourceCheckout, acquire_source, clone_destination, existing_checkout

__all__ = [
    "BuildRequest",
    "ExtensionRequest",
    "SourceCheckout",
    "acquire_source",
    "clean_build_folder",
    "clone_destination",
    "default_log_dir",
    "existing_checkout",
    "run_build",
    "run_build_ext",
]
