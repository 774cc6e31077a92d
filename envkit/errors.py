"""One exception tree for envkit. Each class carries the exit code the CLI turns it into.

Library code raises these; only ``envkit.cli`` prints them and exits.
"""

from __future__ import annotations


class EnvkitError(Exception):
    """Base of every error envkit reports to a user: one clear sentence, optionally a next step."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class BadInputError(EnvkitError):
    """The user gave envkit something it cannot use: a manifest, a profile, a name, an option value."""

    exit_code = 2


class ConfigError(BadInputError):
    """The config file (envkit.state.config) cannot be read or says something envkit cannot use."""


class ManifestError(BadInputError):
    """A manifest or table in the manifests directory is broken. Names the file, the build and the field."""

    def __init__(self, path: str, problem: str, build: str | None = None, field: str | None = None,
                 line: int | None = None) -> None:
        where = path
        if build:
            where += f", build {build}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}", hint="Fix the manifest, or point --manifests at a good copy.")
        self.path = path
        self.build = build
        self.field = field
        self.problem = problem
        self.line = line  # where the problem is, when the file's own structure does not say (text not UTF-8)


class ProfileError(BadInputError):
    """A machine profile file (or a --cuda / --gpu-arch override) cannot be read."""


class UnknownNameError(BadInputError):
    """A manifest or build name that does not exist."""


class InstallError(EnvkitError):
    """Creating an environment failed: an installer or a solve gave up. Carries the installer's last lines."""

    def __init__(self, message: str, hint: str | None = None, tail: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint)
        self.tail = tail


class Interrupted(KeyboardInterrupt):
    """A signal asked envkit to stop (SIGTERM, SIGHUP, SIGQUIT): cleaned up as Ctrl-C is; the exit code is 128 plus
    the signal's number, as a shell reports a process that signal ended (143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.signum = signum
