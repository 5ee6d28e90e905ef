"""Shared views (docs/formats.md, "Shared views"): MF# file views and MQ# question views, provider and consumer sides.

- :mod:`files`: ids, places, ``shared_views.toml``, credentials, tokens, pull state, the supervised write;
- :mod:`package`: the version-2 package rules, safe unpacking, atomic promotion;
- :mod:`provider`: defining views (``create``) and building their packages (``build``);
- :mod:`gitshare`: the Git share transport (publish, join, fetch);
- :mod:`server` / :mod:`client`: the HTTP provider (Starlette on uvicorn) and its consumer client;
- :mod:`consumer`: connect, pull, list, ask, and the bounded refresh before a retrieve;
- :mod:`questions`: a provider answering a question view with its retrieve role.

Retrieval sits below this package and never imports it: it reads the promoted imports
(``.runtime/shared_views/imports/<view>/dist/``) directly. Nothing here is imported when
the engine is.
"""

from __future__ import annotations


def refresh_before_retrieve(root) -> list:
    """Pull the file views due a refresh, within a small time budget; never raises (see consumer)."""
    from rmtui.engine.views.consumer import refresh_before_retrieve as refresh

    return refresh(root)
