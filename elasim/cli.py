"""Command-line interface (placeholder until the CLI lands)."""


def main() -> None:
    """Entry point."""
