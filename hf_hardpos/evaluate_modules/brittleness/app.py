import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("hardpos/brittleness")
launch_gradio_widget(module)
