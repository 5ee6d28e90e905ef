"""The Textual workbench. Talks to the engine only; owns no engine logic."""
