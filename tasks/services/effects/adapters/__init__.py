"""The adapters by action type: the only ways an effect can leave Switchyard."""

from __future__ import annotations

from tasks.services.effects.adapters import ad_campaign, deploy_hook, email, github_dispatch
from tasks.services.effects.adapters.base import Adapter

ADAPTERS: dict[str, Adapter] = {
    a.action_type: a
    for a in (deploy_hook.ADAPTER, email.ADAPTER, github_dispatch.ADAPTER, ad_campaign.ADAPTER)
}
