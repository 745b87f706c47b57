name = "World"
print("Hello, " + "name" + "!")
