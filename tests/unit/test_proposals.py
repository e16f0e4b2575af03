"""Only what a project can carry out is proposed (tasks/startup/proposals.py)."""

from tasks.services.effects.policy import Operator, refusals
from tasks.startup import proposals

CONTEXT = {"actions_refused": {
    "ad_campaign": "this project may not perform ad_campaign effects: set "
                   "projects.settings.permissions.ad_campaign to true to allow them"}}
ACTIONS = [
    {"type": "email", "title": "Send the update", "args": {"to": "a@b.test"}},
    {"type": "ad_campaign", "title": "Test demand", "args": {"channel": "search"}},
    {"type": "phase_advance", "title": "Move on", "args": {"from": 1, "to": 2}},
]


def test_by_default_money_and_code_pushes_are_refused_naming_the_setting():
    refused = refusals({})
    assert sorted(refused) == ["ad_campaign", "github_dispatch"]
    assert "projects.settings.permissions.ad_campaign to true" in refused["ad_campaign"]
    assert refusals({"permissions": {"ad_campaign": True, "github_dispatch": True}}) == {}


def test_what_the_operator_forbids_is_refused_whatever_the_project_says():
    only_email = Operator.parse("email", "")
    refused = refusals({"permissions": {"deploy_hook": True}}, only_email)
    assert sorted(refused) == ["ad_campaign", "deploy_hook", "github_dispatch"]
    assert "SWITCHYARD_EFFECTS_ALLOWED" in refused["deploy_hook"]


def test_a_malformed_setting_refuses_its_kind_with_the_reason():
    refused = refusals({"permissions": {"email": "yes"}})
    assert "permissions.email must be true or false" in refused["email"]


def test_a_model_that_proposes_a_refused_kind_anyway_has_it_set_aside():
    kept, aside = proposals.within(ACTIONS, CONTEXT)
    assert [a["type"] for a in kept] == ["email", "phase_advance"]
    assert aside == [{"type": "ad_campaign", "title": "Test demand",
                      "reason": CONTEXT["actions_refused"]["ad_campaign"]}]
    line = proposals.log_line(aside)
    assert line.startswith("1 proposed action(s) set aside, not allowed for this project: "
                           "ad_campaign: ")
    assert "projects.settings.permissions.ad_campaign" in line


def test_the_model_is_told_what_not_to_propose_and_why():
    said = proposals.prompt(CONTEXT)
    assert "Do not propose actions of these types" in said
    assert "ad_campaign (this project may not perform" in said
    assert proposals.prompt({"actions_refused": {}}) == ""


def test_a_context_checkpointed_before_refusals_existed_sets_nothing_aside():
    assert proposals.within(ACTIONS, {}) == (ACTIONS, [])
    assert proposals.prompt({}) == "" and proposals.log_line([]) == ""
