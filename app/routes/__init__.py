"""HTTP routes, one blueprint per resource."""
