"""The fleet's shared compiler cache: which remote storage an entry's build uses, checked first.

sccache and clcache store and fetch the objects themselves; this module only reads
build_config/shared_cache.toml to name the backend the environment selects, adds the matrix's
non-secret [shared_cache] variables, and checks a TCP endpoint before the build. An unreachable
shared cache makes that build use the local cache with a warning, instead of failing it: a
slower wheel beats no wheel.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.knowledge.config_files import load_toml, optional, require, string_list
from pytorch_winbuild.planning.plan_model import EnvChange
from pytorch_winbuild.text.redact import redact_text

KNOWLEDGE_FILE = "shared_cache.toml"
CONNECT_TIMEOUT_SECONDS = 3.0
_FALSE_WORDS = {"", "0", "OFF", "NO", "FALSE", "N"}  # PyTorch's env.py spelling of "off"
_SOCKET_SCHEMES = {"unix", "redis+unix"}


@dataclass(frozen=True)
class Backend:
    name: str
    select: tuple[str, ...]
    requires: tuple[tuple[str, ...], ...]
    default_port: int | None


@dataclass(frozen=True)
class Engine:
    name: str
    local: str
    source_folder: str | None
    backends: tuple[Backend, ...]


@dataclass(frozen=True)
class SharedCache:
    """Where one entry's compiler cache stores objects, and what the nightly adds for it."""

    engine: str
    backends: tuple[str, ...]  # the remote backends the environment selects; () = local only
    location: str  # redacted
    fallback: str | None  # why a selected backend is not used for this build
    changes: tuple[EnvChange, ...]

    def describe(self) -> str:
        if self.engine == "none":
            return "no compiler cache"
        where = (
            f"{self.engine} → {', '.join(self.backends)} ({self.location})"
            if self.backends
            else f"{self.engine} → local ({self.location})"
        )
        return where + (f"; {self.fallback}" if self.fallback else "")

    def to_dict(self) -> JsonObject:
        return {
            "engine": self.engine,
            "backends": list(self.backends),
            "location": self.location,
            "fallback": self.fallback,
        }


def _backend(name: str, table: object, where: str) -> Backend:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where}: expected a table with select and requires.")
    groups = require(table, "requires", list, where)
    if not all(isinstance(group, list) and group and all(isinstance(v, str) for v in group) for group in groups):
        raise ConfigurationError(
            f'{where}.requires: expected a list of variable lists such as [["A", "B"]], got {groups!r}.'
        )
    port = optional(table, "default_port", int, where, 0)
    if port < 0 or port > 65535:
        raise ConfigurationError(f"{where}.default_port: {port} is not a TCP port.")
    select = string_list(table, "select", where)
    if not select:
        raise ConfigurationError(f"{where}.select: name at least one variable.")
    return Backend(name, tuple(select), tuple(tuple(group) for group in groups), port or None)


def parse_engines(data: Mapping[str, object], source: str) -> dict[str, Engine]:
    engines = {}
    for name, table in data.items():
        where = f"{source}: {name}"
        if not isinstance(table, dict):
            raise ConfigurationError(f"{where}: expected a table.")
        backends: dict[str, object] = optional(table, "backends", dict, where, {})
        source_folder = optional(table, "source_folder", str, where, "")
        engines[name] = Engine(
            name=name,
            local=require(table, "local", str, where),
            source_folder=source_folder or None,
            backends=tuple(
                _backend(backend, spec, f"{where}.backends.{backend}") for backend, spec in backends.items()
            ),
        )
    return engines


@functools.lru_cache(maxsize=1)
def load_engines() -> dict[str, Engine]:
    return parse_engines(load_toml(KNOWLEDGE_FILE), f"build_config/{KNOWLEDGE_FILE}")


def _is_set(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().upper() not in _FALSE_WORDS


def endpoints(value: str, default_port: int) -> list[tuple[str, int]]:
    """(host, port) of every TCP endpoint in a URL or a comma-separated list; Unix sockets are left out."""
    found = []
    for part in (piece.strip() for piece in value.split(",")):
        if not part:
            continue
        parsed = urlsplit(part if "://" in part else f"tcp://{part}")
        if parsed.scheme in _SOCKET_SCHEMES or not parsed.hostname:
            continue
        try:
            port = parsed.port or default_port
        except ValueError:
            raise ConfigurationError(
                f"the shared cache endpoint {redact_text(part)} has an invalid port.",
                fix="write it as host:port or redis://host:port.",
            ) from None
        found.append((parsed.hostname, port))
    return found


def unreachable(value: str, default_port: int) -> str | None:
    """Why none of the endpoints answers a TCP connection, or None when one does (or none can be checked)."""
    targets = endpoints(value, default_port)
    problems = []
    for host, port in targets:
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS):
                return None
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc.strerror or exc}")
    return "; ".join(problems) or None


def shared_cache(
    engine_name: str,
    build_env: Mapping[str, str],
    matrix_env: tuple[tuple[str, str], ...],
    matrix_source: str,
    source_dir: str,
) -> SharedCache:
    """The cache an entry's build will use with `engine_name` (the plan's compiler cache), and the changes for it.

    `build_env` is the runner's environment with the plan's variables; the matrix's
    [shared_cache] variables apply where it does not set them.
    """
    engines = load_engines()
    if engine_name == "none":
        return SharedCache("none", (), "", None, ())
    engine = engines.get(engine_name)
    changes = [
        EnvChange(name, value, "set", f"shared compiler cache ({matrix_source} [shared_cache])")
        for name, value in matrix_env
        if name not in build_env
    ]
    env = {**dict(matrix_env), **build_env}
    if engine is None:
        return SharedCache(engine_name, (), "its default local folder", None, tuple(changes))
    if engine.source_folder:
        changes.append(
            EnvChange(
                engine.source_folder,
                source_dir,
                "set",
                "the checkout folder is stripped from cache keys, so runners with other checkout paths share entries",
            )
        )
    selected, locations, fallback = [], [], None
    for backend in engine.backends:
        chosen = next((name for name in backend.select if _is_set(env, name)), None)
        if chosen is None:
            continue
        for group in backend.requires:
            if not any(_is_set(env, name) for name in group):
                raise ConfigurationError(
                    f"the {engine.name} {backend.name} cache is switched on by {chosen}, but "
                    f"{' or '.join(group)} is not set.",
                    fix=f"set {group[0]} in the runner's environment (a secret when it is a credential), or "
                    f"unset {chosen}.",
                )
        problem = unreachable(env[chosen], backend.default_port) if backend.default_port else None
        if problem:
            fallback = (
                f"the shared {backend.name} cache {redact_text(env[chosen])} is unreachable ({problem}), so this "
                "build used the local cache"
            )
            changes += [
                EnvChange(name, "", "unset", f"the shared {backend.name} cache is unreachable: use the local cache")
                for name in backend.select
                if name in env
            ]
            continue
        selected.append(backend.name)
        locations.append(redact_text(env[chosen]))
    location = ", ".join(locations) if selected else f"{engine.local}={env.get(engine.local, 'its default')}"
    return SharedCache(engine.name, tuple(selected), location, fallback, tuple(changes))
