"""``tilelang.tools.pass_visualizer``: a kernel file's compilation, pass by pass, as an HTML
page and a text dump (upstream's pass visualizer; see ``viewer``)."""
