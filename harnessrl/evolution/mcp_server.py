"""The evolver's tools over MCP: a streamable-HTTP server inside the trainer process, loopback + token.

:class:`ToolServer` serves an :class:`~harnessrl.evolution.service.EvolutionService` with the official
``mcp`` SDK (FastMCP's ``streamable_http_app()``) under uvicorn, in a daemon thread of the trainer::

    server = ToolServer(service)
    url, token = server.start()           # http://127.0.0.1:PORT/mcp, a fresh random token
    ...                                   # the graph connects with langchain-mcp-adapters:
    client = MultiServerMCPClient({"harnessrl": {"transport": "streamable_http", "url": url,
                                                 "headers": {"Authorization": f"Bearer {token}"}}})
    async with client.session("harnessrl") as session:   # keep ONE session open (≈2 ms a call)
        tools = await load_mcp_tools(session)
    server.stop()

How it is put together, and why:

- The socket is bound here to ``127.0.0.1:0`` and handed to ``uvicorn.Server.run(sockets=[sock])``: the
  OS picks a free port and nobody can take it between choosing and binding. Nothing but loopback can
  connect, and the SDK's DNS-rebinding protection (on for a 127.0.0.1 host) refuses a foreign ``Host``.
  ``ToolServer(host=...)`` refuses any other host: the tools change training, and the token is all
  that stands between them and whoever can reach the port.
- Every request needs ``Authorization: Bearer <token>`` (the SDK's own bearer middleware with our
  token verifier; anything else is a 401). The token is compared as bytes with
  ``hmac.compare_digest``: constant time, and a non-ASCII header cannot raise (a str compare would,
  and become a 500).
- A request body larger than ``max_request_bytes`` (1 MiB) is answered with HTTP 413 before it is
  parsed (the SDK's body limit); an argument longer than its tool allows is a validation error the
  client reads (the limits are in :mod:`harnessrl.interfaces.tools`). No tool takes a path: the tools
  write ``harness.json`` and ``events.jsonl`` of the run directory and the run's training memory, no
  other file.
- A FastMCP instance serves only once, so every :meth:`ToolServer.start` builds a new one (and a new
  token); start/stop can repeat.
- Tools are generated from the service's tool table (:func:`harnessrl.interfaces.tools.tool_table`):
  each tool function's signature is its
  argument model's fields (flat parameters, see :mod:`harnessrl.interfaces.tools`), its body validates the
  whole model and runs the service method in a worker thread (a trial may take minutes; the server's
  event loop stays responsive). Results are pydantic models, so clients get structured output. A tool
  error or a validation error reaches the client as an error result (``isError``), which
  langchain-mcp-adapters turns into ``ToolMessage(status="error")`` for the LLM to act on; the server
  stays up.
- uvicorn gets ``log_config=None`` (it must not reconfigure the process's logging), and FastMCP's
  constructor is kept from installing its own root handler. Every normal client session close makes
  the SDK log "Error in standalone SSE writer" with a traceback; that one record is filtered out.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from harnessrl.errors import HarnessRLError
from harnessrl.interfaces.tools import ToolSpec, flat_parameters

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.fastmcp import FastMCP

    from harnessrl.evolution.service import EvolutionService

__all__ = ["ToolServer"]

logger = logging.getLogger(__name__)

SSE_WRITER_MESSAGE = "Error in standalone SSE writer"
LOOPBACK = "127.0.0.1"
MAX_REQUEST_BYTES = 1 << 20
"""Largest request body the tool server reads (1 MiB); a larger one is answered with HTTP 413."""
INSTRUCTIONS = (
    "HarnessRL evolver tools: read the detected reward failures, the training memory, rollouts and the "
    "harness; build candidate updates (one builder per harness interface); measure them on the "
    "frozen policy; commit the accepted ones."
)


class _DropStandaloneSSEWriterError(logging.Filter):
    """Drops the record the SDK logs on every normal session close (a client hanging up its GET stream)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != SSE_WRITER_MESSAGE


def _install_log_filter() -> None:
    log = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, _DropStandaloneSSEWriterError) for f in log.filters):
        log.addFilter(_DropStandaloneSSEWriterError())


@contextlib.contextmanager
def _no_root_logging_setup() -> Iterator[None]:
    """FastMCP's constructor calls ``logging.basicConfig``; a library must not configure the root logger.
    With a handler present, basicConfig does nothing."""
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)


class _TokenVerifier:
    """The SDK's ``TokenVerifier`` protocol for one shared secret."""

    def __init__(self, token: str):
        self._expected = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        # bytes, not str: compare_digest raises on non-ASCII str (a 500); headers arrive latin-1 decoded
        got = token.encode("utf-8", "surrogatepass")
        if hmac.compare_digest(got, self._expected):
            return AccessToken(token=token, client_id="harnessrl-evolver", scopes=[])
        return None


def _tool_function(spec: ToolSpec, impl: Callable[[Any], BaseModel], result: type[BaseModel]) -> Callable[..., Any]:
    """An async tool function whose signature is ``spec.args``'s fields and whose return type is ``result``."""
    import anyio.to_thread

    args_model = spec.args

    async def call(**kwargs: Any) -> BaseModel:
        args = args_model.model_validate(kwargs)  # the whole model: its cross-field rules too
        return await anyio.to_thread.run_sync(impl, args)

    call.__name__ = call.__qualname__ = spec.name
    call.__doc__ = spec.description
    call.__signature__ = inspect.Signature(flat_parameters(args_model), return_annotation=result)  # type: ignore[attr-defined]
    return call


class ToolServer:
    """Serves an :class:`~harnessrl.evolution.service.EvolutionService` over MCP (see the module docstring).

    Args:
        service: the tools' implementation.
        name: the MCP server name.
        host: where to listen: loopback only (``127.0.0.1``, or ``localhost`` for the same); anything else
            is refused with a :class:`~harnessrl.errors.HarnessRLError`.
        max_request_bytes: largest request body read; a larger one gets HTTP 413.
        start_timeout: seconds to wait for the server to accept connections.
        shutdown_timeout: seconds :meth:`stop` lets open connections finish before closing them.
    """

    def __init__(
        self,
        service: EvolutionService,
        *,
        name: str = "harnessrl",
        host: str = LOOPBACK,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        start_timeout: float = 10.0,
        shutdown_timeout: float = 1.0,
    ):
        if host not in (LOOPBACK, "localhost"):
            raise HarnessRLError(
                f"the evolver tool server listens on loopback ({LOOPBACK}) only, not {host!r}: its tools change "
                "training. Run the external evolver (`harnessrl evolver`) on the trainer's machine, or reach "
                f"the port through an SSH tunnel (ssh -L PORT:{LOOPBACK}:PORT trainer-host)"
            )
        if max_request_bytes <= 0:
            raise HarnessRLError(f"max_request_bytes must be a positive number of bytes, not {max_request_bytes}")
        self.service = service
        self.name = name
        self.max_request_bytes = max_request_bytes
        self.start_timeout = start_timeout
        self.shutdown_timeout = shutdown_timeout
        self.url: str | None = None
        self.token: str | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def build(self, token: str) -> FastMCP:
        """A new FastMCP server with every tool the service serves (one builder per registered interface;
        one server per start)."""
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.fastmcp import FastMCP
        from mcp.types import ToolAnnotations

        with _no_root_logging_setup():
            mcp = FastMCP(
                name=self.name,
                instructions=INSTRUCTIONS,
                token_verifier=_TokenVerifier(token),
                # we are a resource server only: no OAuth metadata routes, the issuer is never contacted
                auth=AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None),
                host=LOOPBACK,  # turns on the SDK's DNS-rebinding protection for loopback
                max_request_body_size=self.max_request_bytes,
                log_level="WARNING",
            )
        impls = self.service.tool_methods()
        for spec in self.service.tools().values():
            result = spec.result
            mcp.add_tool(
                _tool_function(spec, impls[spec.name], result),
                name=spec.name,
                description=spec.description,
                annotations=ToolAnnotations(readOnlyHint=spec.read_only),
                structured_output=True,
            )
        return mcp

    def start(self) -> tuple[str, str]:
        """Start serving on a free loopback port; returns ``(url, token)``."""
        import uvicorn

        if self.running:
            raise HarnessRLError(f"the tool server is already running at {self.url}: stop() it first")
        _install_log_filter()
        token = secrets.token_urlsafe(32)
        app = self.build(token).streamable_http_app()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((LOOPBACK, 0))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=self.shutdown_timeout,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"harnessrl-tool-server-{port}", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                thread.join(timeout=2)
                sock.close()
                raise HarnessRLError(
                    f"the evolver tool server did not start on {LOOPBACK}:{port} within {self.start_timeout} s "
                    "(see the log above for uvicorn's error)"
                )
            time.sleep(0.005)
        self._server, self._thread, self._sock = server, thread, sock
        self.url, self.token = f"http://{LOOPBACK}:{port}/mcp", token
        logger.info("evolver tools served at %s", self.url)
        return self.url, token

    def stop(self) -> None:
        """Stop serving (idempotent); open sessions are closed after ``shutdown_timeout`` seconds."""
        server, thread, sock = self._server, self._thread, self._sock
        self._server = self._thread = self._sock = None
        self.url = self.token = None
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout=self.shutdown_timeout + 5)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5)
            if thread.is_alive():
                logger.warning("the evolver tool server thread did not stop; it is a daemon and dies with the process")
        if sock is not None:
            sock.close()

    def __enter__(self) -> ToolServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
