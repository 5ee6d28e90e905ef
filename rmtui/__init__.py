"""rmtui: terminal workbench and headless engine for RightMemory-style memory."""

__version__ = "0.1.0"
