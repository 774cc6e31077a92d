"""What the probe records: errors as JSON, the guard that turns any exception into one, the stderr it keeps, and the
small conversions every framework's probe uses."""

import io
import math
import traceback

TEXT_LIMIT = 6000
STDERR_LIMIT = 20000


def clip(text, limit=TEXT_LIMIT):
    text = str(text)
    return text if len(text) <= limit else "..." + text[-limit:]


def error_record(where, exc):
    """An exception as JSON: where it happened, its type, its message and the traceback text."""
    return {
        "where": where,
        "type": type(exc).__name__,
        "message": clip(exc),
        "traceback": clip(traceback.format_exc()),
    }


class Recorder(object):
    """The report being built, and the guard that turns any exception into an entry of it."""

    def __init__(self, report):
        self.report = report

    def guarded(self, where, function, default=None):
        try:
            return function()
        except Exception as exc:  # recorded, never raised: the probe must always print its JSON
            self.report["errors"].append(error_record(where, exc))
            return default


class TeeText(io.TextIOBase):
    """Python-level stderr that is also kept: numpy's "compiled using NumPy 1.x" message is written there."""

    def __init__(self, real):
        self.real = real
        self.kept = []
        self.size = 0

    def write(self, text):
        if self.size < STDERR_LIMIT:
            self.kept.append(text)
            self.size += len(text)
        try:
            return self.real.write(text)
        except Exception:
            return len(text)

    def flush(self):
        try:
            self.real.flush()
        except Exception:
            pass

    def fileno(self):
        return self.real.fileno()

    def isatty(self):
        return False

    @property
    def encoding(self):
        return getattr(self.real, "encoding", "utf-8")

    def text(self):
        return clip("".join(self.kept), STDERR_LIMIT)


def finite(value):
    return value is not None and not (math.isnan(value) or math.isinf(value))


def cuda_text(number):
    """1000 * major + 10 * minor (12080) -> '12.8'; other forms are returned as text."""
    try:
        number = int(number)
    except (TypeError, ValueError):
        return None if number is None else str(number)
    if number <= 0:
        return None
    return "%d.%d" % (number // 1000, (number % 1000) // 10)


def distributions(prefixes):
    """Installed distributions whose name starts with one of the prefixes: {name: version}."""
    found = {}
    try:
        from importlib import metadata  # Python 3.8+
        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").lower()
            if any(name.startswith(p) for p in prefixes):
                found[name] = dist.version
    except Exception:
        try:
            import pkg_resources
            for dist in pkg_resources.working_set:
                name = dist.project_name.lower()
                if any(name.startswith(p) for p in prefixes):
                    found[name] = dist.version
        except Exception:
            pass
    return found


def skipped(reason):
    return {"ok": None, "skipped": reason}


def as_text(value):
    return None if value is None else str(value)
