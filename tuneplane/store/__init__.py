"""Everything that touches SQL. Routes call these functions; they never build queries."""
