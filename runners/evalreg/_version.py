"""The version of evalreg, recorded in every summary, report and record it writes."""

__version__ = "0.1.0"
