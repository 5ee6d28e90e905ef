"""Headless retrieval: ``retrieve``, ``embedding-service``, ``retrieve-index``.

``retrieve`` never imports torch: dense scoring goes through an embedding service
(configured, or the local warm one started on demand). ``embedding-service`` is the one
command that loads a model in its own process.
"""

from __future__ import annotations

import argparse
import os
import sys

from rmtui.commands import Result
from rmtui.engine.display import warning_lines


def register(sub, common) -> None:
    p = sub.add_parser("retrieve", parents=[common], help="the memory that matters for a need, as source text")
    p.add_argument("--session", required=True, help="stable conversation id (delivery history is per session)")
    p.add_argument("--top", type=int,
                   help="how many results (default: [retrieve.embedding] result_count if set, else retrieve.top_k)")
    p.add_argument("--include-returned", action="store_true",
                   help="send again items already delivered unchanged in this session")
    p.add_argument("--no-pending", dest="include_pending", action="store_false",
                   help="leave out evidence not yet reconciled into memory (shown apart from memory by default)")
    p.add_argument("need", nargs="+", help="what the agent needs to know")
    p.set_defaults(handler=cmd_retrieve)

    p = sub.add_parser("embedding-service", parents=[common],
                       help="serve the embedding model over the RightMemory HTTP API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8766, help="0 picks a free port")
    p.add_argument("--model", help="model name (default: embedding.model, the bundled all-MiniLM-L6-v2)")
    p.add_argument("--model-path", help="local folder of a sentence-transformers model")
    p.add_argument("--reranker-path", help="local folder of a cross-encoder reranker")
    p.add_argument("--token-env", default="RIGHTMEMORY_EMBEDDING_API_KEY",
                   help="environment variable holding the bearer token (unset: no token)")
    p.add_argument("--idle-timeout", type=float, help="exit after this many idle seconds")
    p.add_argument("--backend", choices=("auto", "onnx", "torch"),
                   help="what runs the embedding model (default: embedding.backend, \"auto\": ONNX Runtime "
                        "when the model can be exported, else torch)")
    p.add_argument("--device", help="cpu, cuda, cuda:N, or auto (default: embedding.device, \"auto\": the first "
                                    "CUDA GPU torch can use, else the CPU)")
    p.add_argument("--precision", choices=("float32", "int8"),
                   help="the model's weights (default: embedding.precision, \"float32\"; \"int8\": quantised, "
                        "faster on a CPU, vectors cached apart)")
    p.add_argument("--state-dir", help=argparse.SUPPRESS)  # used by the local warm service launcher
    p.add_argument("--warm-root", action="append", default=[], help=argparse.SUPPRESS)  # ditto: read while loading
    p.set_defaults(handler=cmd_embedding_service)

    p = sub.add_parser("embedding-export", parents=[common],
                       help="export the embedding model to ONNX once, so the embedding service starts without torch")
    p.add_argument("--model", help="model name (default: embedding.model, the bundled all-MiniLM-L6-v2)")
    p.add_argument("--model-path", help="local folder of a sentence-transformers model")
    p.set_defaults(handler=cmd_embedding_export)

    p = sub.add_parser("retrieve-index", parents=[common], help="embed the whole corpus into the vector cache")
    p.set_defaults(handler=cmd_retrieve_index)


class _SayWaits:
    """Says on stderr what a slow retrieval waits for (the model starting, passages being
    embedded): each step once, counts at most every 2 s. A warm call reports nothing."""

    def __init__(self) -> None:
        self.last: str | None = None
        self.at = 0.0

    def __call__(self, p) -> None:
        import time

        now = time.monotonic()
        if p.what == self.last and (p.total is None or (now - self.at < 2.0 and p.done != p.total)):
            return
        self.last, self.at = p.what, now
        count = f" ({p.done} of {p.total})" if p.total else ""
        sys.stderr.write(f"rmtui: {p.what}{count}…\n")
        sys.stderr.flush()


def cmd_retrieve(args) -> Result:
    from rmtui.engine import progress

    with progress.reporting(_SayWaits()):
        return _retrieve(args)


def _retrieve(args) -> Result:
    from rmtui.commands.core import root_of
    from rmtui.engine.retrieval.modelhost.client_settings import settings_digest
    from rmtui.engine.retrieval.modelhost.embed_client import delegate_retrieve, delegated_result

    root = root_of(args)
    need = " ".join(args.need)
    digest = settings_digest(root.path)  # of the bytes read before the loader validates them
    cfg = root.config()
    if cfg.get("sync.enabled") or (root.path / "shared_views.toml").is_file():
        from rmtui.engine.host import retrieve_upkeep

        retrieve_upkeep.start(root)  # other machines' memory and the views' packages: in the background
    answer = delegate_retrieve(root.path, cfg, args.session, need, top=args.top,
                               include_returned=args.include_returned, include_pending=args.include_pending)
    if answer is not None:
        data, text = delegated_result(answer)
        data["via"] = "local-service"
        _record_for_thin_client(root.path, digest, cfg)
    else:  # no warm service yet: retrieve here (this starts one for the next call)
        from rmtui.engine.retrieval.retrieve import retrieve

        res = retrieve(root, args.session, need, top=args.top, include_returned=args.include_returned,
                       include_pending=args.include_pending)
        data, text = res.to_json(), res.text
        data["via"] = "cli"
    sys.stderr.write(warning_lines(data.get("warnings", [])))
    sys.stderr.flush()
    return Result(data, text)


def _record_for_thin_client(root_path, digest: str, cfg) -> None:
    """The service answered: these settings (validated, nothing left to migrate) may be served
    by the thin client next time (docs/architecture.md, "Retrieval"); the service starts the
    pull check and the views' refresh of a root that has them (``retrieve_upkeep``)."""
    from rmtui.engine.retrieval.modelhost.client_settings import record_settings
    from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

    if cfg.notices:
        return
    model = resolve_model_path(cfg.get("embedding.model"), cfg.get("embedding.model_path"))
    record_settings(root_path, digest, model, cfg.get("embedding.reranker_path"), str(cfg.get("embedding.precision")))


def _config_or_none(args):
    from rmtui.commands.core import root_of
    from rmtui.engine.errors import EngineError

    explicit = getattr(args, "root", None) or getattr(args, "profile", None)
    try:
        return root_of(args).config()
    except EngineError:
        if explicit:
            raise
        return None


def cmd_embedding_service(args) -> Result:
    from pathlib import Path

    from rmtui.engine.host import retrieve_upkeep
    from rmtui.engine.retrieval.modelhost import embed_service
    from rmtui.engine.retrieval.modelhost.embed_service import serve

    embed_service.BEFORE_RETRIEVE = retrieve_upkeep.start  # the model host may not import sync or views
    cfg = None if (args.model_path or args.state_dir) else _config_or_none(args)
    model = args.model or (cfg.get("embedding.model") if cfg else None)
    model_path = args.model_path or (cfg.get("embedding.model_path") if cfg else None)
    reranker = args.reranker_path or (cfg.get("embedding.reranker_path") if cfg else None)
    idle = args.idle_timeout
    token = os.environ.get(args.token_env) or None
    if not 0 <= args.port <= 65535:
        from rmtui.engine.errors import UsageError

        raise UsageError("--port must be between 0 and 65535")
    backend = args.backend or (cfg.get("embedding.backend") if cfg else "auto")
    device = args.device or (cfg.get("embedding.device") if cfg else "auto")
    precision = args.precision or (cfg.get("embedding.precision") if cfg else "float32")
    code = serve(host=args.host, port=args.port, model=model, model_path=model_path, reranker_path=reranker,
                 token=token, idle_timeout=idle, state_dir=Path(args.state_dir) if args.state_dir else None,
                 backend=backend, device=device, warm_roots=tuple(Path(r) for r in args.warm_root),
                 precision=precision)
    return Result({"stopped": True}, "", exit_code=code)


def cmd_embedding_export(args) -> Result:
    """Made by scripts/install.sh; otherwise the first service start makes it."""
    from rmtui.engine.errors import UnavailableError
    from rmtui.engine.retrieval.modelhost import onnx_model
    from rmtui.engine.retrieval.modelhost.model_cache import model_identity
    from rmtui.engine.retrieval.modelhost.service_state import resolve_model_path

    cfg = None if args.model_path else _config_or_none(args)
    path = resolve_model_path(args.model or (cfg.get("embedding.model") if cfg else None),
                              args.model_path or (cfg.get("embedding.model_path") if cfg else None))
    identity = model_identity(path, "sentence-transformers")
    try:
        folder, created = onnx_model.prepare_export(path, identity)
    except onnx_model.ExportUnsupported as exc:
        raise UnavailableError(f"this model cannot use ONNX Runtime (it keeps running on torch): {exc}") from exc
    except onnx_model.ExportDamaged as exc:
        raise UnavailableError(f"the ONNX export failed: {exc}") from exc
    out = {"model": identity, "export": str(folder), "created": created}
    return Result(out, f"{'exported' if created else 'already exported'}: {identity} -> {folder}")


def cmd_retrieve_index(args) -> Result:
    from rmtui.commands.core import root_of
    from rmtui.engine.retrieval.retrieve import index_root

    out = index_root(root_of(args))
    return Result(out, f"{out['state']}: {out['indexed']} passages embedded")
