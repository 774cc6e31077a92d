"""Which frameworks the environment has: their top-level packages found, none of them imported (the check and the
all-reduce across nodes both start from this)."""

FRAMEWORKS = ("torch", "tensorflow", "jax", "mxnet")


def installed_frameworks():
    """The frameworks whose top-level package can be found, without importing any of them."""
    try:
        from importlib.util import find_spec
    except ImportError:
        return []
    found = []
    for name in FRAMEWORKS:
        try:
            if find_spec(name) is not None:
                found.append(name)
        except Exception:
            found.append(name)  # a broken package is still "installed": importing it will say how it is broken
    return found


def framework_for(requested):
    """(the framework to use, None) for ``requested`` (auto: the first installed), or (None, why there is none)."""
    if requested in FRAMEWORKS:
        return requested, None
    if requested != "auto":
        return None, "unknown framework %r; expected auto, %s" % (requested, ", ".join(FRAMEWORKS))
    installed = installed_frameworks()
    if not installed:
        return None, "none of %s is installed" % ", ".join(FRAMEWORKS)
    return installed[0], None
