"""Route modules. ``series_item`` must be included last: its ``{name:path}`` catches all.
Likewise ``pools.item`` comes after ``pools.collection``, which holds the pool sub-resources."""
