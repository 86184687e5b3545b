"""Route modules. ``series_item`` must be included last: its ``{name:path}`` catches all."""
