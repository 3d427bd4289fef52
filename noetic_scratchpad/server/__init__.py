"""The ASGI app (``create_app``), its event stream and web inspector; needs the
``[server]`` extra (Starlette, uvicorn).

``create_app(storage=..., layers=..., token=None, events=None)`` returns a
:class:`ScratchpadApp`: serve it with uvicorn, or mount it in a FastAPI or Starlette app
and run its lifespan inside the host's (see docs/server.md).
"""

from .._extras import needs_extra

with needs_extra("noetic_scratchpad.server", "server", "Starlette", ("starlette", "uvicorn")):
    from .app import ScratchpadApp, create_app

__all__ = ("ScratchpadApp", "create_app")
