def render(rows):
    return "\n".join(rows)
