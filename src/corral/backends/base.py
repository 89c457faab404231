"""What a decode loop needs from a model: prompt rendering and batched forward passes.

A :class:`Backend` wraps one loaded model (transformers, llama.cpp, ...). A :class:`Batch` is
the KV cache of a set of sequences decoded together. Each :meth:`Batch.forward` call appends a
chunk of tokens to every live row — one token for a sampled step, several when jump-ahead
appends forced tokens or at prefill — and returns the logits after each row's last token, so
forced tokens cost one forward pass however many there are.

Rows come and go: :meth:`Batch.keep` drops finished rows, :meth:`Batch.fork` copies rows into a
new batch, and :meth:`Batch.extend` appends another batch's rows (continuous batching: requests
that arrive while others decode are prefilled in a batch of their own, then merged so that
every later step is one forward pass for all of them).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from corral.errors import CorralError
from corral.tokenizer import Tokenizer

__all__ = ["Backend", "Batch", "Prompt", "default_threads"]

# A prompt: plain text, or chat messages ({"role": ..., "content": ...}) for the chat template.
Prompt = str | Sequence[Mapping[str, Any]]


class Batch(ABC):
    """The decoding state (KV cache) of a batch of sequences."""

    @abstractmethod
    def forward(self, chunks: Sequence[Sequence[int]], *, all_positions: bool = False) -> Any:
        """Append ``chunks[i]`` (at least one token) to row ``i`` and return a float32 torch
        tensor ``(rows, width)`` of the logits that follow each row's last token (llama.cpp:
        a numpy array while torch is not imported, so greedy decoding never imports it).

        With ``all_positions`` the result is ``(rows, n, width)`` for the longest chunk length
        ``n``: row ``i``'s chunk occupies the *last* ``len(chunks[i])`` positions (left padded),
        and position ``j`` holds the logits after the chunk's token at ``j``."""

    @abstractmethod
    def keep(self, rows: Sequence[int]) -> None:
        """Keep only the given rows (in this order), dropping finished sequences so they stop
        costing compute."""

    @abstractmethod
    def fork(self, rows: Sequence[int]) -> Batch:
        """A new, independent batch whose row ``k`` continues this batch's row ``rows[k]`` (rows
        may repeat: several continuations of one prompt share its prefill)."""

    def extend(self, other: Batch) -> None:
        """Append ``other``'s rows after this batch's rows (in their order), taking over their
        state; ``other`` is left empty and must not be used again. Both batches come from the
        same backend, and either may be empty (never forwarded).

        Optional: the default raises NotImplementedError, and callers then keep the batches
        apart (one forward pass per batch per step instead of one for all rows)."""
        raise NotImplementedError(f"{type(self).__name__} cannot merge batches")


class Backend(ABC):
    """A loaded causal language model that corral can decode with."""

    #: Short backend name ("transformers", "llama.cpp").
    name: str
    #: The model's vocabulary as a corral tokenizer; its width equals the logits width.
    tokenizer: Tokenizer
    #: Longest sequence (prompt + output) the model accepts.
    context_length: int
    #: Where the model came from (a path), for messages and results.
    source: str

    @property
    def has_chat_template(self) -> bool:
        return False

    @property
    def chat_template_source(self) -> str | None:
        """The chat template's Jinja text (None without one): what the tool-call format is
        detected from (:func:`corral.grammar.tool_formats.detect_format`)."""
        return None

    def render_text(
        self,
        prompt: Prompt,
        *,
        chat: bool | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[str, bool]:
        """The prompt as text, and whether the tokenizer should add its special prefix (BOS).

        Messages always use the chat template; plain text uses it (as one user message) when
        ``chat`` is true, or when ``chat`` is None and the model has one; otherwise the text is
        used as is (with the tokenizer's BOS, if it adds one)."""
        if isinstance(prompt, str):
            use_chat = self.has_chat_template if chat is None else chat
            if not use_chat:
                return prompt, True
            messages: Sequence[Mapping[str, Any]] = [{"role": "user", "content": prompt}]
        else:
            messages = prompt
        if not self.has_chat_template:
            raise CorralError(f"model {self.source} has no chat template: pass the prompt as text")
        # ``tools`` (OpenAI tool objects) and ``template_kwargs`` go to templates that use them;
        # passed only when given, so a backend's override without them keeps working.
        extra: dict[str, Any] = dict(template_kwargs or {})
        if tools:
            extra["tools"] = [dict(t) for t in tools]
        return self.apply_chat_template([dict(m) for m in messages], **extra), False

    def apply_chat_template(self, messages: list[dict[str, Any]], **variables: Any) -> str:
        """The model's chat template applied to ``messages``, ending with the assistant's turn
        opening (``add_generation_prompt``); ``variables`` (``tools``, a request's
        ``chat_template_kwargs``) are template variables. Backends with a chat template
        override this."""
        raise CorralError(f"model {self.source} has no chat template")

    @abstractmethod
    def encode(self, text: str, *, add_special: bool = False) -> list[int]:
        """Token ids of ``text`` as the model's own tokenizer produces them (special-token
        text such as ``<|im_start|>`` becomes the special token)."""

    def render(
        self,
        prompt: Prompt,
        *,
        chat: bool | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """Token ids of a prompt (see :meth:`render_text`)."""
        if tools or template_kwargs:
            text, add_special = self.render_text(
                prompt, chat=chat, tools=tools, template_kwargs=template_kwargs
            )
        else:
            text, add_special = self.render_text(prompt, chat=chat)
        return self.encode(text, add_special=add_special)

    @abstractmethod
    def new_batch(self) -> Batch:
        """An empty batch (rows are created by the first :meth:`Batch.forward`)."""

    def describe(self) -> str:
        return f"{self.name}:{self.source}"


def default_threads() -> int:
    """Threads for the forward pass: one less than the cores this process may run on (at least
    one). torch and llama.cpp spin-wait between layers, so a thread that loses its core to
    another process stalls all the others: measured on a shared 2-core machine, 2 threads took
    6.0 s where 1 thread took 0.5 s for the same 4 forward passes. Leaving a core free keeps
    the tokenizer, the mask computation and the rest of the machine off the model's threads."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)
