def demo():
    return 1
