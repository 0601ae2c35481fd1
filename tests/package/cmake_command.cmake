# Prints the path of the cmake binary running it (not of a wrapper or shim).
message("${CMAKE_COMMAND}")
