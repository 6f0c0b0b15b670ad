"""One flag table (planning/flag_table.py): every Invoke task's signature, its help and the settings agree with it,
and parse_options has a reader for each text flag, so a flag added in one place cannot be missing in another."""

from __future__ import annotations

import inspect

import pytest

from pytorch_winbuild.faces.config_check import NUMBER_SETTINGS
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS
from pytorch_winbuild.faces.plan_request import PLAN_FLAGS, TEXT_FLAGS
from pytorch_winbuild.faces.tasks import namespace
from pytorch_winbuild.planning.flag_table import BY_NAME, FLAGS, NO_SETTING, OTHER_MEANING, PLAN_TASKS, SETTINGS
from pytorch_winbuild.planning.options import READERS, Options


def _parameters(task_name: str) -> dict[str, inspect.Parameter]:
    task = namespace.tasks[task_name.replace("_", "-")]
    return dict(list(inspect.signature(task.body).parameters.items())[1:])  # without the Context


def _tasks() -> list[str]:
    return sorted(name.replace("-", "_") for name in namespace.tasks)


@pytest.mark.parametrize("task_name", _tasks())
def test_each_task_takes_exactly_the_table_flags_it_lists_with_their_defaults(task_name: str) -> None:
    parameters = _parameters(task_name)
    listed = {flag.name for flag in FLAGS if task_name in flag.tasks}
    assert listed <= set(parameters), f"{task_name} lacks {sorted(listed - set(parameters))}"
    unlisted = {name for name in parameters if name in BY_NAME and (task_name, name) not in OTHER_MEANING} - listed
    assert not unlisted, f"{task_name} takes {sorted(unlisted)}, which the table does not list for it"
    for name in listed:
        assert parameters[name].default == BY_NAME[name].default, (task_name, name)


@pytest.mark.parametrize("task_name", PLAN_TASKS)
def test_the_planning_tasks_help_is_the_tables(task_name: str) -> None:
    task = namespace.tasks[task_name.replace("_", "-")]
    for flag in FLAGS:
        if task_name in flag.tasks:
            assert task.help[flag.name] == flag.help_of(task_name), (task_name, flag.name)


def test_settings_plan_flags_and_readers_come_from_the_table() -> None:
    assert WINBUILD_DEFAULTS == SETTINGS == namespace.configuration()["winbuild"]
    assert set(NUMBER_SETTINGS) <= set(SETTINGS)
    assert all(flag.setting is NO_SETTING for flag in FLAGS if flag.name not in SETTINGS)
    assert set(READERS) == {*TEXT_FLAGS, "mode"}  # --mode is typed by the task that has it
    option_fields = {field for field in Options.__dataclass_fields__}
    assert set(PLAN_FLAGS) <= option_fields, sorted(set(PLAN_FLAGS) - option_fields)
    for task_name in PLAN_TASKS:  # every flag a planning task hands plan_from_flags is one it has
        assert {name for name in PLAN_FLAGS if task_name in BY_NAME[name].tasks} <= set(_parameters(task_name))
