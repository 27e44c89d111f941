"""An application module that raises a ValueError while it is imported (as a bad setting in a
framework's own configuration does): not to be taken for an invalid corral configuration."""


def read_setting(text):
    return int(text)


PORT = read_setting("eighty")
