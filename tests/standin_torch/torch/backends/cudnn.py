def is_available():
    return False


def version():
    return None
