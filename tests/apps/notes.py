"""A domain deployed twice: `notes_v1` schedules `Remind` with a plain `text`; `notes_v2`
reads `Remind` at revision 2, its text inside a `message`, with the upcaster from revision 1
(`notes_v2()`) or without it (`notes_v2(upcasting=False)`), as a deploy that forgot it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from wow_temporal import (
    App,
    CommandBody,
    DecideScope,
    Decision,
    NamedAggregate,
    ScheduleRule,
    aggregate,
    on_command,
    upcaster,
)

NOTE = NamedAggregate("notes", "note")
REMIND = "notes.Remind"
KEY = "remind"


class Write(CommandBody):
    __wow_type__ = "notes.Write"
    millis: int = Field(ge=1)


class RemindV1(CommandBody):
    __wow_type__ = REMIND
    text: str


class Message(BaseModel):
    text: str
    lang: str = "en"


class RemindV2(CommandBody):
    __wow_type__ = REMIND
    __wow_revision__: ClassVar[int] = 2
    message: Message


class Written(BaseModel):
    __wow_type__ = "notes.Written"


class Reminded(BaseModel):
    __wow_type__ = "notes.Reminded"
    text: str


class NoteState:
    def __init__(self, note_id: str) -> None:
        self.id = note_id


@aggregate("note")
class NoteV1:
    def __init__(self, state: NoteState) -> None:
        self.state = state

    @on_command(produces=[Written], schedules=[REMIND], create=True)
    def write(self, command: Write, scope: DecideScope) -> Decision:
        rule = ScheduleRule.after(timedelta(milliseconds=command.millis))
        scope.schedule(KEY, rule, RemindV1(text=f"due after {command.millis} ms"))
        return Decision.events(Written())

    @on_command(produces=[Reminded])
    def remind(self, command: RemindV1) -> Decision:
        return Decision.events(Reminded(text=command.text))


@aggregate("note")
class NoteV2:
    def __init__(self, state: NoteState) -> None:
        self.state = state

    @on_command(produces=[Written], schedules=[REMIND], create=True)
    def write(self, command: Write, scope: DecideScope) -> Decision:
        rule = ScheduleRule.after(timedelta(milliseconds=command.millis))
        scope.schedule(KEY, rule, RemindV2(message=Message(text=f"due after {command.millis}")))
        return Decision.events(Written())

    @on_command(produces=[Reminded])
    def remind(self, command: RemindV2) -> Decision:
        return Decision.events(Reminded(text=f"{command.message.lang}: {command.message.text}"))


@upcaster(RemindV2, revision=1)
def text_in_a_message(body: dict[str, Any]) -> dict[str, Any]:
    """Revision 1 kept the text alone; revision 2 wraps it in a message with its language."""
    return {"message": {"text": body["text"], "lang": "en"}}


notes_v1 = App(NOTE.context_name, aggregates=[NoteV1])


def notes_v2(*, upcasting: bool = True) -> App:
    return App(
        NOTE.context_name,
        aggregates=[NoteV2],
        upcasters=[text_in_a_message] if upcasting else [],
    )


def notes_v2_without_upcaster() -> App:
    """`notes_v2` as a deploy that forgot the upcaster (`--app tests.apps.notes:...`)."""
    return notes_v2(upcasting=False)
