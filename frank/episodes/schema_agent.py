"""The agent loop of constrained tool calls (a profile's `tool_calls = "schema"`), in the agent venv.

Each turn asks the model for one answer constrained to the JSON schema of the task's tools
(frank.episodes.schema_calls, sent as inspect's `response_schema`: the request's `response_format`). A
valid answer becomes a real inspect ToolCall that inspect's `execute_tools` runs with the task's real tools
in the episode's sandbox; `submit` ends the episode. A refused answer runs nothing: the model is told why,
and the transcript marks the refusal (`metadata.frank_refused`), which the harness counts.

Two message lists: the transcript (state.messages: the calls and inspect's tool messages, as in any inspect
agent) and the request (`view`: plain system/user/assistant text, the answer as the model wrote it and each
result as a user message), because the request carries no `tools` for the chat template to render.

The request must fit the engine's context (`context_tokens`): every byte of text is at most one token
(byte-level BPE), so a tool output that would still be in a later request is cut to its share of the room
left after the later turns' reserve; inspect's truncation notice says so in the output itself, and its tool
event records the original size (`truncated`). Each answer's transcript message keeps the bound its
request was held to (`metadata.frank_prompt_bound`).
"""

from __future__ import annotations

from inspect_ai.agent import Agent, AgentState, agent
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ResponseSchema,
    execute_tools,
    get_model,
)
from inspect_ai.tool import Tool, ToolCall, ToolDef
from inspect_ai.util import JSONSchema, LimitExceededError

from frank.episodes.schema_calls import SUBMIT, RefusedAnswer, ToolSpec, answer_schema, read_answer, tools_prompt

MESSAGE_OVERHEAD = 8  # the chat template's role markers and newlines around one message, in tokens
NOTICE_BYTES = 256  # inspect's "output was too long" wrapper around a cut output
MARGIN = 128


def tool_specs(tools: list[Tool]) -> list[ToolSpec]:
    specs = []
    for tool in tools:
        info = ToolDef(tool)
        specs.append(ToolSpec(info.name, info.description, info.parameters.model_dump(exclude_none=True)))
    return specs


def prompt_bound(messages: list[ChatMessage]) -> int:
    """An upper bound on the request's prompt tokens: a byte-level BPE token holds at least one byte."""
    return sum(len(m.text.encode()) + MESSAGE_OVERHEAD for m in messages) + MESSAGE_OVERHEAD


def output_cap(view: list[ChatMessage], turn: int, max_turns: int, max_tokens: int, context: int | None) -> int | None:
    """Bytes a tool output of `turn` may keep so that every later request still fits the context; None
    when no later request will carry it (the last turn) or the context is unknown."""
    if context is None or turn >= max_turns:
        return None
    later_turns = max_turns - turn  # requests that will carry this output; each adds an answer and a result
    reserve = max_tokens + (later_turns - 1) * (2 * max_tokens + MESSAGE_OVERHEAD * 2) + MARGIN
    room = context - prompt_bound(view) - reserve - MESSAGE_OVERHEAD
    return max(room // later_turns - NOTICE_BYTES, 64)


def result_text(message: ChatMessage) -> str:
    if isinstance(message, ChatMessageTool):
        if message.error is not None:
            return f"The {message.function} call failed: {message.error.message}"
        return f"The {message.function} call returned:\n{message.text}"
    return message.text


@agent
def schema_agent(
    instructions: str, tools: list[Tool], max_turns: int, max_tokens: int, context_tokens: int | None
) -> Agent:
    async def execute(state: AgentState) -> AgentState:
        specs = tool_specs(tools)
        schema = JSONSchema.model_validate(answer_schema(specs))
        config = GenerateConfig(response_schema=ResponseSchema(name="tool_call", json_schema=schema))
        system = ChatMessageSystem(content=f"{instructions}\n\n{tools_prompt(specs)}")
        state.messages.insert(0, system)
        view: list[ChatMessage] = [system, *[ChatMessageUser(content=m.text) for m in state.messages[1:]]]
        for turn in range(1, max_turns + 1):
            bound = {"frank_prompt_bound": prompt_bound(view)}  # what the answer's request was held to
            output = await get_model().generate(view, config=config)
            state.output = output
            text = output.completion
            view.append(ChatMessageAssistant(content=text))
            try:
                name, arguments = read_answer(text, specs, cut_off=output.stop_reason == "max_tokens")
            except RefusedAnswer as refused:
                note = f"Refused, nothing ran: {refused.reason}. Answer with one JSON object that calls a tool."
                state.messages.append(ChatMessageAssistant(content=text, model=output.model, metadata=bound))
                state.messages.append(ChatMessageUser(content=note, metadata={"frank_refused": refused.reason}))
                view.append(ChatMessageUser(content=note))
                continue
            call = ToolCall(id=f"call_{turn}", function=name, arguments=arguments)
            state.messages.append(
                ChatMessageAssistant(content=text, tool_calls=[call], model=output.model, metadata=bound)
            )
            if name == SUBMIT:
                state.output.completion = arguments["answer"]
                return state
            cap = output_cap(view, turn, max_turns, max_tokens, context_tokens)
            result = await execute_tools(state.messages, tools, max_output=cap)
            for message in result.messages:
                state.messages.append(message)
                view.append(ChatMessageUser(content=result_text(message)))
        raise LimitExceededError("turn", value=max_turns, limit=max_turns)

    return execute
