"""The HTML views: the overview page (``overview``) with its cards' parts — forecast freshness
and band (``overview_status``), the profile comparison (``overview_compare``), the shared pools'
cards (``overview_pools``) — and the series charts as PNG (``charts``) drawn from what
``chart_data`` reads. Nothing is imported here, so a command that draws one chart loads only
what that chart needs."""
