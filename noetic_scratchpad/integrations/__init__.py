"""Drop-ins for the agent stacks people use; each module needs its extra installed:
``pydantic_ai`` (``[pydantic-ai]``), ``openai_agents`` (``[openai-agents]``), ``mcp``
(``[mcp]``)."""
