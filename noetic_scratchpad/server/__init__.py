"""The ASGI app (``create_app``), its event stream and web inspector; needs the
``[server]`` extra."""
