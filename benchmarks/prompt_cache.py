"""(10) What a change of the notes costs the provider's prompt cache, per host and placement.

Providers cache the longest unchanged prefix of a request: the part of a request that
repeats the previous one is read from the cache (cheaper, and much faster on a long
history); everything from the first changed token on is processed again. This replays one
scripted conversation of 60 turns through each host's own request building, with the
``<scratchpad>`` block after the conversation (``placement="end"``, the default) and before
it (``"start"``, the seed's order), and counts the share of input tokens a prefix cache
could serve:

- the harness with the OpenAI Responses, OpenAI Chat and Anthropic adapters: the request
  bodies the adapters hand the SDK client (a fake client records them);
- pydantic-ai: ``Agent`` with ``ScratchpadCapability`` on a ``FunctionModel``, which gets
  the messages and instructions pydantic-ai would send;
- the OpenAI Agents SDK: ``Runner.run`` with ``Scratchpad`` and its ``input_filter``, on a
  ``Model`` that records the instructions and input the SDK builds.

The conversation: every turn the user writes a paragraph and the model answers at length;
every third turn the model first calls the update tool (20 updates, the notes growing to
about 450 tokens), so the request after it shows the new notes. The history grows to about
44,000 tokens. Each request is laid out as the provider reads it (tools, system prompt or
instructions, then the messages, each as canonical JSON) and compared with the request
before it: the shared prefix is what a cache could serve. Tokens are estimated as
``len(text) / 4`` (tiktoken's encodings cannot be downloaded everywhere); as OpenAI does,
a prefix under 1,024 tokens is not cached and a longer one counts in whole steps of 128.
Every request is also checked to carry the notes as they were stored when it was built.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from noetic_scratchpad import scratchpad
from noetic_scratchpad.adapters import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from noetic_scratchpad.adapters.names import ToolNameMap
from noetic_scratchpad.items import Item, Message
from noetic_scratchpad.runtime import Agent, AgentHarness

from ._harness import Comparison, Config, Stats, skipped

TURNS = 60
UPDATE_EVERY = 3
TARGET = 90.0
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
PLACEMENTS = ("end", "start")
NAMES = {"end": "end (default)", "start": "start (the seed's order)"}
INSTRUCTIONS = (
    "You are a careful engineer working on a long migration. Keep your working notes in "
    "the scratchpad: what the goal is, what is done and what comes next."
)
THREAD = "bench-thread"

WORDS = (
    "invoice payment ledger webhook retry cohort rollout latency replay batch schema customer",
    "refund currency rounding flag cutover staging canary alert dashboard queue migration",
    "contract timeout idempotent reconcile export report audit trace deploy",
)
VOCABULARY = [word for line in WORDS for word in line.split()]


# -- the script ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One user turn: the user's text, the notes the model writes first (if any), its answer."""

    number: int
    user: str
    update: dict[str, Any] | None
    answer: str

    @property
    def call_id(self) -> str:
        return f"call_{self.number}"


def _prose(rng: random.Random, chars: int, lead: str) -> str:
    words = [lead]
    while sum(len(word) + 1 for word in words) < chars:
        words.append(rng.choice(VOCABULARY))
    return " ".join(words) + "."


def script() -> list[Turn]:
    """The 60 turns, the same on every run."""
    turns: list[Turn] = []
    done: list[str] = []
    for number in range(1, TURNS + 1):
        rng = random.Random(number)
        update = None
        if number % UPDATE_EVERY == 0:
            version = number // UPDATE_EVERY
            done.append(f"turn {number}: {_prose(rng, 60, 'replayed')}")
            update = {
                "version": f"notes-v{version}",
                "goal": "Move billing to the payments platform without downtime",
                "done": list(done),
                "next": _prose(rng, 80, "check"),
            }
        turns.append(
            Turn(
                number=number,
                user=_prose(rng, 600, f"Turn {number}:"),
                update=update,
                answer=_prose(rng, 1800, f"Answer {number}:"),
            )
        )
    return turns


def expected_versions(turns: Sequence[Turn]) -> list[str | None]:
    """The notes version each request must show: the one stored when it is built."""
    expected: list[str | None] = []
    current: str | None = None
    for turn in turns:
        if turn.update is not None:
            expected.append(current)  # the request that makes the update
            current = turn.update["version"]
        expected.append(current)  # the request after it (or the turn's only request)
    return expected


def model_steps(turns: Sequence[Turn]) -> list[tuple[Turn, bool]]:
    """The model's replies in order: ``(turn, True)`` calls the update tool, ``False`` answers."""
    steps: list[tuple[Turn, bool]] = []
    for turn in turns:
        if turn.update is not None:
            steps.append((turn, True))
        steps.append((turn, False))
    return steps


# -- counting what a prefix cache serves -----------------------------------------------------


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def layout(segments: Sequence[Any]) -> str:
    """A request as the provider reads it: its parts in order, each as canonical JSON."""
    return "\n".join(canonical(segment) for segment in segments)


def estimate(chars: int) -> int:
    return chars // 4


def shared_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (a binary search over
    slice comparisons, which run in C: ``os.path.commonprefix`` walks it in Python)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def cacheable(previous: str, current: str) -> int:
    """Tokens of ``current`` a prefix cache filled by ``previous`` could serve."""
    shared = estimate(shared_prefix(previous, current))
    if shared < CACHE_MIN_TOKENS:
        return 0
    return shared - shared % CACHE_STEP_TOKENS


@dataclass(frozen=True)
class Tally:
    requests: int
    input_tokens: int
    cached_tokens: int
    notes_current: bool

    @property
    def share(self) -> float:
        return 100.0 * self.cached_tokens / self.input_tokens if self.input_tokens else 0.0


def tally(requests: Sequence[str], expected: Sequence[str | None]) -> Tally:
    cached = sum(cacheable(before, after) for before, after in itertools.pairwise(requests))
    return Tally(
        requests=len(requests),
        input_tokens=sum(estimate(len(text)) for text in requests),
        cached_tokens=cached,
        notes_current=len(requests) == len(expected)
        and all(_shows(text, version) for text, version in zip(requests, expected, strict=True)),
    )


def _shows(text: str, version: str | None) -> bool:
    """The request has one block, showing notes ``version`` (none before the first update)."""
    blocks = re.findall(r"<scratchpad>(.*?)</scratchpad>", text, re.DOTALL)
    if version is None:
        return not blocks
    return len(blocks) == 1 and f'\\"version\\": \\"{version}\\"' in blocks[0]


# -- the hosts -------------------------------------------------------------------------------

Replay = Callable[[Sequence[Turn], str], Awaitable[list[str]]]


class _Recorder:
    """Stands in for an SDK client: records each request body, answers from the script."""

    def __init__(self, api: str, steps: list[tuple[Turn, bool]], tool: str) -> None:
        self.api, self.steps, self.tool = api, steps, tool
        self.sent: list[dict[str, Any]] = []
        self.responses = self.messages = self
        self.chat = self
        self.completions = self

    async def create(self, **body: Any) -> dict[str, Any]:
        self.sent.append(json.loads(json.dumps(body)))
        turn, calls = self.steps[len(self.sent) - 1]
        arguments = json.dumps(turn.update)
        if self.api == "responses":
            if calls:
                return {
                    "output": [
                        {
                            "type": "function_call",
                            "call_id": turn.call_id,
                            "name": self.tool,
                            "arguments": arguments,
                        }
                    ]
                }
            text = {"type": "output_text", "text": turn.answer}
            return {"output": [{"type": "message", "content": [text]}]}
        if self.api == "chat":
            call = {
                "id": turn.call_id,
                "type": "function",
                "function": {"name": self.tool, "arguments": arguments},
            }
            message = {"content": None, "tool_calls": [call]} if calls else {"content": turn.answer}
            return {"choices": [{"message": message}]}
        if calls:
            use = {"type": "tool_use", "id": turn.call_id, "name": self.tool, "input": turn.update}
            return {"content": [use]}
        return {"content": [{"type": "text", "text": turn.answer}]}

    def layouts(self) -> list[str]:
        laid: list[str] = []
        for body in self.sent:
            if self.api == "responses":
                laid.append(layout([body.get("tools"), *body["input"]]))
            elif self.api == "chat":
                laid.append(layout([body.get("tools"), *body["messages"]]))
            else:
                laid.append(layout([body.get("tools"), body.get("system"), *body["messages"]]))
        return laid


def harness_replay(api: str) -> Replay:
    models = {
        "responses": OpenAIResponsesModel,
        "chat": OpenAIChatModel,
        "anthropic": AnthropicModel,
    }

    async def replay(turns: Sequence[Turn], placement: str) -> list[str]:
        layer = scratchpad()
        tool = ToolNameMap([f"{layer.id}/update"]).to_provider(f"{layer.id}/update")
        client = _Recorder(api, model_steps(turns), tool)
        agent = Agent(model=models[api](client, "m"), instructions=INSTRUCTIONS)
        harness = AgentHarness("bench", agent, {}, [layer], "memory://", placement=placement)  # type: ignore[arg-type]
        history: list[Item] = []
        async with harness:
            for turn in turns:
                result = await harness.run(
                    [*history, Message(role="user", content=turn.user)], thread_id=THREAD
                )
                history = result.items
        return client.layouts()

    return replay


def pydantic_ai_missing() -> str | None:
    try:
        import noetic_scratchpad.integrations.pydantic_ai  # noqa: F401
    except ImportError as exc:
        return f"pydantic-ai is not installed ({exc})"
    return None


async def pydantic_ai_replay(turns: Sequence[Turn], placement: str) -> list[str]:
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from noetic_scratchpad.integrations.pydantic_ai import ScratchpadCapability

    steps = model_steps(turns)
    laid: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = [
            {"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
            for t in info.function_tools
        ]
        parts = [_pydantic_part(part) for message in messages for part in message.parts]
        laid.append(layout([tools, info.instructions, *parts]))
        turn, calls = steps[len(laid) - 1]
        if calls:
            call = ToolCallPart("scratchpad_update", turn.update, tool_call_id=turn.call_id)
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(turn.answer)])

    history: list[ModelMessage] = []
    async with ScratchpadCapability(storage="memory://", placement=placement) as notes:  # type: ignore[arg-type]
        model = FunctionModel(answer)
        agent = PydanticAgent(model, instructions=INSTRUCTIONS, capabilities=[notes])
        for turn in turns:
            result = await agent.run(turn.user, message_history=history, deps={"thread_id": THREAD})
            history = result.all_messages()
    return laid


def _pydantic_part(part: Any) -> dict[str, Any]:
    """A message part as a provider adapter sends it: its role and content, no timestamps."""
    kind = type(part).__name__
    if kind == "ToolCallPart":
        return {"call": part.tool_name, "id": part.tool_call_id, "args": part.args_as_json_str()}
    if kind in ("ToolReturnPart", "RetryPromptPart"):
        return {"tool_result": part.tool_call_id, "content": str(part.content)}
    return {"part": kind, "content": str(getattr(part, "content", ""))}


def agents_sdk_missing() -> str | None:
    try:
        import noetic_scratchpad.integrations.openai_agents  # noqa: F401
    except ImportError as exc:
        return f"the OpenAI Agents SDK is not installed ({exc})"
    return None


async def agents_sdk_replay(turns: Sequence[Turn], placement: str) -> list[str]:
    from agents import Agent as SDKAgent
    from agents import ModelResponse, RunConfig, Runner, Usage, set_tracing_disabled
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from noetic_scratchpad.integrations.openai_agents import Scratchpad

    set_tracing_disabled(True)
    steps = model_steps(turns)
    laid: list[str] = []

    class Recorder(Model):
        """Records the instructions, input and tools the SDK builds; answers from the script."""

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            *_: Any,
            **__: Any,
        ) -> ModelResponse:
            specs = [
                {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
                for t in tools
            ]
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            laid.append(layout([specs, system_instructions, *json.loads(json.dumps(items))]))
            turn, calls = steps[len(laid) - 1]
            output: Any
            if calls:
                output = ResponseFunctionToolCall(
                    id=f"fc_{turn.number}",
                    call_id=turn.call_id,
                    name="scratchpad_update",
                    arguments=json.dumps(turn.update),
                    type="function_call",
                    status="completed",
                )
            else:
                text = ResponseOutputText(text=turn.answer, type="output_text", annotations=[])
                output = ResponseOutputMessage(
                    id=f"msg_{turn.number}",
                    content=[text],
                    role="assistant",
                    status="completed",
                    type="message",
                )
            return ModelResponse(output=[output], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the replay does not stream")

    history: list[Any] = []
    async with Scratchpad(storage="memory://", placement=placement) as notes:  # type: ignore[arg-type]
        agent = SDKAgent(
            name="bench",
            instructions=notes.instructions(INSTRUCTIONS),
            tools=list(notes.tools),
            model=Recorder(),
        )
        config = RunConfig(call_model_input_filter=notes.input_filter)
        for turn in turns:
            result = await Runner.run(
                agent,
                [*history, {"role": "user", "content": turn.user}],
                context={"thread_id": THREAD},
                run_config=config,
            )
            history = result.to_input_list()
    return laid


HOSTS: dict[str, tuple[Replay, Callable[[], str | None]]] = {
    "harness+responses": (harness_replay("responses"), lambda: None),
    "harness+chat": (harness_replay("chat"), lambda: None),
    "harness+anthropic": (harness_replay("anthropic"), lambda: None),
    "pydantic-ai": (pydantic_ai_replay, pydantic_ai_missing),
    "agents-sdk": (agents_sdk_replay, agents_sdk_missing),
}


# -- the comparisons -------------------------------------------------------------------------


async def measure(host: str) -> dict[str, Tally]:
    replay, _ = HOSTS[host]
    turns = script()
    expected = expected_versions(turns)
    return {placement: tally(await replay(turns, placement), expected) for placement in PLACEMENTS}


def key(host: str) -> str:
    return "prompt_cache_" + host.replace("+", "_").replace("-", "_")


def comparison(host: str, tallies: dict[str, Tally]) -> Comparison:
    end, start = tallies["end"], tallies["start"]
    return Comparison(
        question=10,
        key=key(host),
        title=f"Prompt cache, {host}: input tokens a prefix cache serves, {TURNS} turns",
        unit="% cacheable",
        candidate=NAMES["end"],
        baseline=NAMES["start"],
        results={NAMES[p]: Stats.of([tallies[p].share]) for p in PLACEMENTS},
        higher_is_better=True,
        target=f"the default >= {TARGET:.0f}% of input tokens cacheable; current notes in "
        "every request",
        checks={
            f"default >= {TARGET:.0f}%": end.share >= TARGET,
            "current notes in every request (end)": end.notes_current,
            "current notes in every request (start)": start.notes_current,
        },
        extra={p: vars(tallies[p]) | {"share": tallies[p].share} for p in PLACEMENTS},
    )


def table(rows: dict[str, dict[str, Tally]]) -> str:
    lines = [
        f"  {'host':<18} {'placement':<26} {'requests':>8} {'input tokens':>13} "
        f"{'cacheable':>10} {'share':>7}  notes current"
    ]
    for host, tallies in rows.items():
        for placement in PLACEMENTS:
            t = tallies[placement]
            lines.append(
                f"  {host:<18} {NAMES[placement]:<26} {t.requests:>8} {t.input_tokens:>13,} "
                f"{t.cached_tokens:>10,} {t.share:>6.1f}%  {'yes' if t.notes_current else 'NO'}"
            )
    return "\n".join(lines)


async def run(cfg: Config) -> list[Comparison]:
    comparisons: list[Comparison] = []
    rows: dict[str, dict[str, Tally]] = {}
    for host, (_, missing) in HOSTS.items():
        title = f"Prompt cache, {host}"
        reason = missing()
        if reason is not None:
            comparisons.append(skipped(10, key(host), title, reason))
            continue
        rows[host] = await measure(host)
        comparisons.append(comparison(host, rows[host]))
    print(table(rows), flush=True)
    return comparisons
