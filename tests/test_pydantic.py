"""Pydantic models as constraints: every output generated under a model's schema parses back into
the model without a validation error (nested, optional, list, enum, Literal, union, recursive,
constrained and dataclass/TypedDict types)."""

from __future__ import annotations

import dataclasses
import enum
import random
from typing import Annotated, Literal, Optional, Union

import pytest
from helpers import random_walk
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this spelling on Python < 3.12

import corral


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: int
    y: int


class Shape(BaseModel):
    name: str = Field(max_length=12)
    points: list[Point] = Field(max_length=3)
    color: Color


class Person(BaseModel):
    name: str
    age: Optional[int] = None  # noqa: UP045 - the typing spelling users write
    email: Optional[str] = None  # noqa: UP045


class Labelled(BaseModel):
    label: Literal["spam", "ham"]
    score: float = Field(ge=0, le=1)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(ge=0, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    pet: Union[Cat, Dog]  # noqa: UP007


class Tree(BaseModel):
    value: int
    children: list[Tree] = Field(default_factory=list, max_length=2)


class Config(BaseModel):
    retries: Annotated[int, Field(ge=1, le=5)]
    tags: list[Annotated[str, Field(min_length=1, max_length=5)]] = Field(max_length=2)
    ratio: Optional[float] = None  # noqa: UP045


@dataclasses.dataclass
class Item:
    sku: str
    qty: int


class Movie(TypedDict):
    title: str
    year: int


class Inventory(BaseModel):
    items: list[Item] = Field(max_length=2)
    owner: Person


MODELS: list[object] = [
    Point,
    Shape,
    Person,
    Labelled,
    Cat,
    Pet,
    Tree,
    Config,
    Item,
    Movie,
    Inventory,
    list[Point],
    Literal["a", "b", "c"],
    Color,
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: getattr(m, "__name__", str(m)))
def test_generated_outputs_parse_into_the_model(model: object, llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(model, llama32)
    assert g.model is model
    rng = random.Random(7)
    for _ in range(4):
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.3)
        value = g.parse(out)  # raises on any validation error
        if isinstance(model, type) and issubclass(model, BaseModel):
            assert isinstance(value, model)


def test_parse_reports_post_checked_violations(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(Point, llama32)
    with pytest.raises(corral.OutputValidationError):
        g.parse('{"x": 1}')


def test_non_schema_input_is_a_type_error(llama32: corral.Tokenizer) -> None:
    with pytest.raises(TypeError):
        corral.compile_json_schema(object(), llama32)
