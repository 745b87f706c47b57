def parse(text):
    # TODO: handle empty input
    return text.split(",")
