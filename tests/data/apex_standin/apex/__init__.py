"""envbuild test stand-in for the ``apex`` package (synthetic)."""

__version__ = "0.1"


def has_cpp_ext():
    """True when the C++ extension ``apex_C`` was built and imports."""
    try:
        import apex_C  # noqa: F401
    except ImportError:
        return False
    return True
