from calc import add, mul

assert add(2, 3) == 5, "add"
assert mul(4, 5) == 20, "mul"
print("ok")
