import { render } from 'preact';
import '@picocss/pico/css/pico.min.css';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { App } from './app.tsx';

render(<App />, document.getElementById('app')!);
