"""A stored run's origin: the config and model it started with, and resuming on the same.

A stored `run` records the config file (absolute path and content hash) and the `--model`
override in the run's state; `resume` uses them unless told otherwise (`--config`,
`--model`), and refuses a config whose content changed since unless `--force`: its agents
and tools may no longer be the ones the run's steps were taken with.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from agent.models import stored_without_credentials

from ..config import DEFAULT_CONFIG, Config, find_config_file, load_config, with_default_agent
from ..config_files import read_config_bytes
from ..errors import ConfigError
from ..run_state import RunOrigin
from .common import with_command_line, with_settings

__all__ = ["origin_of", "resume_config"]


def origin_of(args: argparse.Namespace) -> RunOrigin:
    """How this `run` (or a run `serve` stores) starts: its config file (None: the built-in default), `--model`, and the
    settings it gives on the command line."""
    settings = RunOrigin(  # `serve` sets no agent's settings
        model=_absolute(args.model),
        system=getattr(args, "system", None),
        temperature=getattr(args, "temperature", None),
        max_tokens=getattr(args, "max_tokens", None),
    )
    path = Path(args.config) if args.config else find_config_file()
    if path is None:
        return settings
    return settings.model_copy(
        update={"config": str(path.resolve()), "config_sha256": _digest(path)}
    )


def _absolute(model: str | None) -> str | None:
    """`--model scripted:FILE` with FILE absolute, as recorded: a `resume` from another
    directory reads the same script (a config file's are relative to the file already)."""
    if model is None:
        return None
    kind, _, path = model.partition(":")
    if kind != "scripted" or not path:
        return model
    return f"scripted:{Path(path).absolute()}"


def resume_config(
    args: argparse.Namespace, origin: RunOrigin | None, agent: str
) -> tuple[Config, RunOrigin, str | None]:
    """The config to resume `agent`'s run on, with the run's command-line settings, the
    origin it makes, and the model replacing every agent's: `--config`, else the run's own;
    `--model`, else the run's; the command line's `--otel` applies.

    Raises `ConfigError` when the config's content is not what the run started with (unless
    `--force`), the run's config file is gone, or the run's model had credentials in its URL
    (not stored) and `--model` does not give them again.
    """
    model = _given_model(args.model) or _stored_model(origin)
    # Validated, not copied: the origin stored from here holds the model without a password.
    kept = RunOrigin.model_validate({**(origin or RunOrigin()).model_dump(), "model": model})
    named: str | None = args.config or (origin.config if origin else None)
    if named is None:
        # The built-in default the run started with (not a file found here now), or, for a
        # run stored before runs had an origin, whatever is found here.
        config = with_command_line(DEFAULT_CONFIG if origin else load_config(None), args)
        now = kept.model_copy(update={"config": None, "config_sha256": None})
        return _with_origin_settings(config, now, agent), now, model
    path = Path(named)
    try:
        config = with_command_line(load_config(path), args)
    except ConfigError as exc:
        if args.config is None:
            exc.add_note("the run started with this config; name another with --config FILE")
        raise
    now = kept.model_copy(update={"config": str(path.resolve()), "config_sha256": _digest(path)})
    started = origin.config_sha256 if origin else None
    if started is not None and now.config_sha256 != started and not args.force:
        raise ConfigError(
            f"config {path} is not the one the run started with (its content changed): "
            "its agents and tools may differ; pass --force to resume on it anyway"
        )
    return _with_origin_settings(config, now, agent), now, model


def _given_model(model: str | None) -> str | None:
    """`--model`; `ConfigError` when it is a stored spec pasted back with `***` in it."""
    if model is not None and stored_without_credentials(model):
        raise ConfigError(
            f"--model {model} has *** where its URL's credentials go: write them in its place"
        )
    return model


def _stored_model(origin: RunOrigin | None) -> str | None:
    """The run's own `--model`; `ConfigError` when its URL's credentials were left out."""
    model = origin.model if origin else None
    if model is not None and stored_without_credentials(model):
        raise ConfigError(
            f"the run started with --model {model}: the credentials in its URL are not stored; "
            "give the model again with --model, credentials included"
        )
    return model


def _with_origin_settings(config: Config, origin: RunOrigin, agent: str) -> Config:
    config = with_default_agent(config)
    if agent not in config.agents:
        return config  # the caller says which agents there are
    return with_settings(
        config,
        agent=agent,
        system=origin.system,
        temperature=origin.temperature,
        max_tokens=origin.max_tokens,
    )


def _digest(path: Path) -> str | None:
    """The content hash of the config file `path`; None for a pipe (`--config <(...)`), read
    once, already, and never the same file again."""
    if not path.is_file():
        return None
    return hashlib.sha256(read_config_bytes(path)).hexdigest()
